"""A seeded, deterministic simulator of herd's classic group coordinator (issue 15); see sim.py."""
