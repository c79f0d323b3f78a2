"""The Flask layer of a sign-in: the route's steps (start, callback, the client-side POST,
the form-post hop, the confirmation of a start from another site), the state cookie, pages
and redirects. It knows providers only by the protocol the steps need."""
