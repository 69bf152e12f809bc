"""tritonhttp: a fast, thread-safe, drop-in replacement for tritonclient.http."""
