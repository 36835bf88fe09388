"""flask commands: grant points, create a support user, check the ledger and providers,
sweep, work."""

import logging
import sys
import time

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from ..database import limits
from ..extensions import db
from ..jobs import sweep as job_sweep
from ..models import Role
from ..points import accounts, grants, ledger, purchases


def init_app(app: Flask) -> None:
    """Register the commands."""
    app.cli.add_command(grant_points)
    app.cli.add_command(create_support)
    app.cli.add_command(ledger_check)
    app.cli.add_command(sweep)
    app.cli.add_command(providers_check)
    app.cli.add_command(worker)


@click.command("grant-points")
@with_appcontext
@click.argument("email")
@click.argument("amount", type=click.IntRange(min=1))
@click.option("--reason", default="granted by an operator", show_default=True)
def grant_points(email: str, amount: int, reason: str) -> None:
    """Grant AMOUNT points to the user with EMAIL."""
    user = accounts.find_by_email(email)
    if user is None:
        raise click.ClickException(f"no user with email {email}")
    ledger.grant(user.id, amount, reason)
    db.session.commit()
    db.session.refresh(user)
    click.echo(f"{user.email}: balance {user.point_balance}")


@click.command("create-support")
@with_appcontext
@click.argument("email")
@click.password_option()
def create_support(email: str, password: str) -> None:
    """Create a support user who can use /support."""
    try:
        user = accounts.create_user(email, password, points=0, role=Role.SUPPORT)
    except accounts.EmailTaken as exc:
        raise click.ClickException(f"{email} already has an account") from exc
    click.echo(f"support user {user.email} created")


@click.command("ledger-check")
@with_appcontext
def ledger_check() -> None:
    """Check every balance against its ledger, every job's billing, and that none is overdue."""
    with limits.role("console"):
        problems = _ledger_problems()
        older = grants.before_the_rule()
    for problem in problems:
        click.echo(problem, err=True)
    if older:
        click.echo(f"{older} support rows predate the second-operator rule: not checked by it")
    if problems:
        sys.exit(1)
    click.echo("ledger ok")


def _ledger_problems() -> list[str]:
    return (
        [
            f"user {m.user_id} ({m.email}): balance {m.balance} but ledger sums to {m.ledger_sum}"
            for m in ledger.balance_mismatches()
        ]
        + ledger.job_violations()
        # Each purchase credited once for its own session, each reversal within it.
        + purchases.violations()
        # Support never on its own account; a large grant approved by a second operator.
        + grants.violations(current_app.config["SUPPORT_GRANT_APPROVAL_POINTS"])
        # A point held by a job gone past its lease is a point the user cannot use.
        + job_sweep.overdue()
    )


@click.command("sweep")
@with_appcontext
def sweep() -> None:
    """Reap stale jobs of every user and settle failed ones (for operators with a timer)."""
    with limits.role("sweep"):
        reaped, finalized = job_sweep.sweep()
    click.echo(f"reaped {reaped}, finalized {finalized}")


@click.command("providers-check")
@with_appcontext
def providers_check() -> None:
    """Ask each configured real provider, and each zone layer's sample tile; exit 1 on any miss.

    Run it on a connected machine before opening the shop: a layer whose sample is missing
    (404), all transparent or painted in colours not in its legend is not available.
    """
    from ..assessment.sources.probe import check_real
    from ..assessment.sources.providers import make_provider

    provider = current_app.extensions["layer_provider"]
    real = provider.real_providers() if hasattr(provider, "real_providers") else []
    if not real:
        click.echo(f"no real provider configured (LAYER_PROVIDER={provider.name})")
        return
    config = {**current_app.config, "LAYER_PROVIDER": "real"}
    timeout = float(current_app.config.get("LAYER_HTTP_TIMEOUT_SECONDS") or 10)
    started = time.monotonic()
    failed = False
    for name, ok, seen, _ in check_real(make_provider(config), timeout):
        failed = failed or not ok
        click.echo(f"{'ok    ' if ok else 'FAILED'} {name}: {seen}")
    click.echo(f"({(time.monotonic() - started) * 1000:.0f} ms)")
    if failed:
        sys.exit(1)


@click.command("worker")
@with_appcontext
@click.option("--concurrency", type=int, default=None, help="jobs at once [MAX_CONCURRENT_JOBS]")
def worker(concurrency: int | None) -> None:
    """Run queued assessments (JOB_EXECUTOR=procrastinate) until SIGTERM or Ctrl-C."""
    from ..database import schema
    from ..jobs import worker as queue_worker

    app = current_app._get_current_object()
    schema.upgrade_once()  # a worker may start before any web instance has migrated
    logging.getLogger().setLevel(logging.INFO)  # alembic's logging config lowered it
    queue_worker.run(app, concurrency or app.config["MAX_CONCURRENT_JOBS"])
