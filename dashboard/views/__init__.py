"""One module per dashboard page; each exposes ``render(url, sweep)``."""
