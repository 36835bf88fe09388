"""A bare Flask app: the memory baseline (gunicorn -w 1 -k gthread --threads 32).

gunicorn -w 1 -k gthread --threads 32 --no-control-socket bench.bareapp:app
"""

import os
import time

from flask import Flask, jsonify

app = Flask(__name__)


@app.get("/healthz")
def healthz():
    return jsonify(status="ok", pid=os.getpid())


@app.get("/hold")
def hold():
    """Keep a worker thread busy for a moment, so that every pool thread gets created."""
    time.sleep(0.3)
    return "ok\n"
