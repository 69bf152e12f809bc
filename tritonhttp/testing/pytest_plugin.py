"""pytest fixtures for testing Triton Python models (placeholder, filled below)."""
