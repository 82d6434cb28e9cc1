"""The web dashboard (Flask + Jinja2): one view module per page, HTML and .json faces."""
