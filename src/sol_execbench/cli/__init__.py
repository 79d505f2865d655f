"""Command-line interface: thin click commands over the feature packages."""
