"""What a run writes: the grade book, feedback pages, the class summary, Gradescope results."""
