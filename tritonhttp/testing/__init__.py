"""Testing helpers: provisioning real Triton for differential tests (private module)."""
