"""Focused feedback (SWIF2T): planner, controller, investigator and reviewer over one paragraph at a time."""
