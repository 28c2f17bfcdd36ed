"""The wire layer: the byte formats, sans I/O (its modules are imported by name)."""

__all__: list[str] = []
