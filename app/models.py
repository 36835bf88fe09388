"""The tables. Constraints that carry a guarantee are declared here and in the migration."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from flask_login import UserMixin
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, UUID
from sqlalchemy.orm import Mapped, mapped_column

from .extensions import db

TZ = TIMESTAMP(timezone=True)


class Role(StrEnum):
    USER = "user"
    SUPPORT = "support"


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class User(UserMixin, db.Model):
    # point_balance moves only with a point_ledger row: triggers apply each row's amount
    # and refuse any other change, and a new user starts at 0 (migration 03_ledger_enforced).
    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint("point_balance >= 0", name="ck_users_point_balance_nonnegative"),
        CheckConstraint("role IN ('user', 'support')", name="ck_users_role"),
        CheckConstraint("locale IN ('en', 'ja')", name="ck_users_locale"),
        Index("uq_users_email_lower", func.lower(text("email")), unique=True),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    email: Mapped[str] = mapped_column(Text)
    password_hash: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text, server_default=Role.USER.value)
    point_balance: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    locale: Mapped[str | None] = mapped_column(Text)  # None: the browser's language
    timezone: Mapped[str | None] = mapped_column(Text)  # None: Asia/Tokyo
    # Bumped by logout: a session issued under an older generation is dead (web/auth.py).
    session_generation: Mapped[int] = mapped_column(Integer, server_default="0")

    def get_id(self) -> str:
        """Return what Flask-Login keeps in the session: the id and the session generation."""
        return f"{self.id}:{self.session_generation}"

    @property
    def is_support(self) -> bool:
        return self.role == Role.SUPPORT


class LedgerEntry(db.Model):
    # Append-only, and a refund reverses a consume of its own job and user: triggers
    # refuse the rest, for every role (migrations/versions/03_ledger_enforced.py).
    __tablename__ = "point_ledger"
    __table_args__ = (
        # Purchases, their reversal and support rows: migrations/versions/10_purchases.py.
        # Restores, approved grants: migrations/versions/13_till_second_pass.py.
        CheckConstraint(
            "(("
            "(kind = 'grant' AND amount > 0 AND job_id IS NULL AND refund_of IS NULL"
            "  AND checkout_session IS NULL AND operator_id IS NULL)"
            " OR (kind = 'consume' AND amount = -1 AND job_id IS NOT NULL AND refund_of IS NULL"
            "  AND checkout_session IS NULL AND operator_id IS NULL)"
            " OR (kind = 'refund' AND amount = 1 AND refund_of IS NOT NULL"
            "  AND checkout_session IS NULL AND operator_id IS NULL)"
            " OR (kind = 'purchase' AND amount > 0 AND checkout_session IS NOT NULL"
            "  AND job_id IS NULL AND refund_of IS NULL AND operator_id IS NULL)"
            " OR (kind = 'purchase_refund' AND amount <= 0 AND checkout_session IS NOT NULL"
            "  AND refund_of IS NOT NULL AND job_id IS NULL AND operator_id IS NULL)"
            " OR (kind = 'support' AND amount <> 0 AND operator_id IS NOT NULL AND reason <> ''"
            "  AND job_id IS NULL AND refund_of IS NULL AND checkout_session IS NULL)"
            ") AND approver_id IS NULL)"
            " OR (kind = 'purchase_restore' AND amount >= 0 AND checkout_session IS NOT NULL"
            "  AND refund_of IS NOT NULL AND job_id IS NULL AND operator_id IS NULL"
            "  AND approver_id IS NULL)"
            " OR (kind = 'support' AND amount > 0 AND operator_id IS NOT NULL AND reason <> ''"
            "  AND job_id IS NULL AND refund_of IS NULL AND checkout_session IS NULL"
            "  AND approver_id <> operator_id AND approver_id <> user_id)"
            " OR (kind = 'expire' AND amount < 0 AND job_id IS NULL AND refund_of IS NULL"
            "  AND checkout_session IS NULL AND operator_id IS NULL AND approver_id IS NULL)",
            name="ck_point_ledger_kind_amount",
        ),
        # One consume per job, one refund per consume: the database, not the app,
        # is what makes a double charge or a double refund impossible.
        Index(
            "uq_point_ledger_consume_per_job",
            "job_id",
            unique=True,
            postgresql_where=text("kind = 'consume'"),
        ),
        Index(
            "uq_point_ledger_refund_per_consume",
            "refund_of",
            unique=True,
            postgresql_where=text("kind = 'refund'"),
        ),
        # One credit and one reversal per Stripe Checkout Session, however often and
        # however concurrently its webhook is delivered.
        Index(
            "uq_point_ledger_purchase_per_session",
            "checkout_session",
            unique=True,
            postgresql_where=text("kind = 'purchase'"),
        ),
        Index(
            "uq_point_ledger_purchase_refund_per_session",
            "checkout_session",
            unique=True,
            postgresql_where=text("kind = 'purchase_refund'"),
        ),
        Index(
            "uq_point_ledger_purchase_restore_per_session",
            "checkout_session",
            unique=True,
            postgresql_where=text("kind = 'purchase_restore'"),
        ),
        Index("ix_point_ledger_user_id", "user_id", "id"),
        Index("ix_point_ledger_job_id", "job_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    kind: Mapped[str] = mapped_column(Text)
    amount: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("assessment_jobs.id"))
    refund_of: Mapped[int | None] = mapped_column(ForeignKey("point_ledger.id"))
    reason: Mapped[str] = mapped_column(Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    checkout_session: Mapped[str | None] = mapped_column(Text)  # purchase, purchase_refund
    operator_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))  # support rows
    # The console form's one-time value (migration 11_purchases_fix): one row per submit.
    support_nonce: Mapped[str | None] = mapped_column(Text)
    # The second support user who approved a grant above SUPPORT_GRANT_APPROVAL_POINTS.
    approver_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))


class CheckoutSession(db.Model):
    """A Stripe Checkout Session we created: the after-pay page's state, not the books."""

    __tablename__ = "checkout_sessions"
    __table_args__ = (
        CheckConstraint(
            "status IN ('open', 'awaiting_payment', 'paid', 'failed', 'expired')",
            name="ck_checkout_sessions_status",
        ),
        CheckConstraint("points > 0"),
        CheckConstraint("amount > 0"),
        Index("ix_checkout_sessions_user", "user_id", "created_at"),
        Index(
            "uq_checkout_sessions_payment_intent",
            "payment_intent",
            unique=True,
            postgresql_where=text("payment_intent IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    points: Mapped[int] = mapped_column(Integer)
    amount: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="open")
    payment_intent: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())


class Job(db.Model):
    __tablename__ = "assessment_jobs"
    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'running', 'succeeded', 'failed')", name="ck_jobs_status"
        ),
        CheckConstraint("lang IN ('en', 'ja')", name="ck_jobs_lang"),
        # Written with the clock's time, never the transaction's: no negative durations.
        CheckConstraint("finished_at >= started_at", name="ck_jobs_finished_after_start"),
        # At most one job in flight per user: a second concurrent submit fails
        # with a unique violation (23505), which the app answers with 409.
        Index(
            "uq_assessment_jobs_one_in_flight",
            "user_id",
            unique=True,
            postgresql_where=text("status IN ('pending', 'running')"),
        ),
        Index("ix_assessment_jobs_user_created", "user_id", "created_at"),
        # What the sweep finalizes: few rows, found without scanning the table.
        Index(
            "ix_assessment_jobs_unfinalized",
            "id",
            postgresql_where=text("status = 'failed' AND finalized_at IS NULL"),
        ),
        Index("ix_assessment_jobs_finished_at", "finished_at"),  # the operations page
    )

    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=func.gen_random_uuid()
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    status: Mapped[str] = mapped_column(Text, server_default=JobStatus.PENDING.value)
    query_text: Mapped[str] = mapped_column(Text)
    lang: Mapped[str] = mapped_column(Text)
    area: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(TZ)
    run_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))  # the run that started it
    heartbeat_at: Mapped[datetime | None] = mapped_column(TZ)
    # Its process is finishing before a restart: the job page says so.
    draining: Mapped[bool] = mapped_column(Boolean, server_default=false())
    finished_at: Mapped[datetime | None] = mapped_column(TZ)
    finalized_at: Mapped[datetime | None] = mapped_column(TZ)
    error_code: Mapped[str | None] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text, server_default="")
    step: Mapped[str] = mapped_column(Text, server_default="")
    progress: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    result_purged_at: Mapped[datetime | None] = mapped_column(TZ)


class Incident(db.Model):
    __tablename__ = "incidents"
    __table_args__ = (
        CheckConstraint(
            "severity IN ('info', 'warning', 'critical')", name="ck_incidents_severity"
        ),
        # However many polls retry a failing finalizer, a job raises one incident per code.
        Index("uq_incidents_job_code", "job_id", "code", unique=True),
        # A payment's incident opens once however often its webhook is re-delivered.
        Index(
            "uq_incidents_payment_ref_code",
            "payment_ref",
            "code",
            unique=True,
            postgresql_where=text("payment_ref IS NOT NULL"),
        ),
        Index("ix_incidents_open", "created_at", postgresql_where=text("resolved_at IS NULL")),
        Index(
            "ix_incidents_unalerted",
            "id",
            postgresql_where=text("severity = 'critical' AND alerted_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    scope: Mapped[str] = mapped_column(Text)
    code: Mapped[str] = mapped_column(Text)
    severity: Mapped[str] = mapped_column(Text)
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("assessment_jobs.id"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    detail: Mapped[str] = mapped_column(Text, server_default="")
    created_at: Mapped[datetime] = mapped_column(TZ, server_default=func.now())
    resolved_at: Mapped[datetime | None] = mapped_column(TZ)
    resolved_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    resolution: Mapped[str | None] = mapped_column(Text)
    alerted_at: Mapped[datetime | None] = mapped_column(TZ)  # posted to ALERT_WEBHOOK_URL
    alert_attempt_at: Mapped[datetime | None] = mapped_column(TZ)  # a post claimed, maybe failed
    payment_ref: Mapped[str | None] = mapped_column(Text)  # a Checkout Session or charge


class Housekeeping(db.Model):
    """One row per opportunistic chore; its last_run_at decides who runs it next."""

    __tablename__ = "housekeeping"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    last_run_at: Mapped[datetime | None] = mapped_column(TZ)
