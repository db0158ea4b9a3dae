"""asv benchmarks of ntnumba (see ../README.md)."""
