"""One module per plot or panel; each class is a pn.viewable.Viewer over the session model (app/session.py)."""
