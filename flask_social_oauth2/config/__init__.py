"""Configuration, without Flask or Werkzeug: the settings record (``OAuth2Settings``),
``OAuth2Info`` and ``SocialProfile``, blocks read from a mapping or a YAML file, and where a
profile's fields are found."""
