"""Instructor-only tools, never shipped to students: stubs, the student kit, nbgrader, shards."""
