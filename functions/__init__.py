"""Thin Lambda handlers over the duetime core layer."""
