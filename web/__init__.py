"""What every face needs: the edge every HTTP request passes, the overload bound, body limits,
security headers, who is calling (session cookie, API tokens), CSRF and how errors leave
(docs/architecture.md, "Packages"). It imports no face: the app (api) composes the faces on it.
"""
