"""The extension's routes, mounted by ``init_app`` under ``SOCIAL_OAUTH2_URL_RULE``: the sign-in
route (:mod:`.sign_in`), the sign-out routes (:mod:`.logout`) and the documents providers fetch
(:mod:`.documents`). Each view finds its provider in the app's runtime record and hands it to
the steps of :mod:`flask_social_oauth2.web`; nothing below calls back up into a view."""
