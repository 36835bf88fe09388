"""A bare Flask app: the SIGTERM baseline (bench/recovery.py, row 3c).

gunicorn -w 1 -k gthread --threads 8 --no-control-socket bench.bareapp:app
"""

import os

from flask import Flask, jsonify

app = Flask(__name__)


@app.get("/healthz")
def healthz():
    return jsonify(status="ok", pid=os.getpid())
