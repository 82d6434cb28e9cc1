"""One module per page; each registers an HTML route and its .json twin."""
