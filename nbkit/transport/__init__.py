"""The transport layer: reading and writing stream files and stdio pipes (its modules are imported by name)."""

__all__: list[str] = []
