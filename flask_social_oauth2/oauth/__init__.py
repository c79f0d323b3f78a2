"""The OAuth 2.0 protocol, without Flask or Werkzeug: the authorization request, PAR, the
token request and its answer, client authentication, DPoP, revocation, provider metadata and
the HTTP client with its deadline. Functions take the HTTP client, the clock and the metadata
lookup as arguments."""
