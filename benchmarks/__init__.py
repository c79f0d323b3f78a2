"""Side-by-side benchmarks of flask-social-oauth2, a bare Flask baseline, Authlib and Flask-Dance.

Run ``python -m benchmarks`` (or ``--short`` for CI); see ``benchmarks/README.md``.
"""
