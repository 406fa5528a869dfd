"""pytest glue (being written)."""
