"""herd's pytest plugin, loaded through the `pytest11` entry point (fixtures are added in issue 15)."""
