"""The bftcore Panel dashboard; `panel serve app` runs app/main.py."""
