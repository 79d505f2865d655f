"""Timing methods: each turns a loop of timed calls into per-call times (see ``evaluate.timing``)."""
