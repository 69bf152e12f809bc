"""Backends: what runs a model. Only ``python`` (Triton Python-backend models) so far."""
