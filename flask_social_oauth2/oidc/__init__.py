"""OpenID Connect, without Flask or Werkzeug: discovery documents and key sets (cached per
process) and ID token checks."""
