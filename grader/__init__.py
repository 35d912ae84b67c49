"""The autograder: grades submission folders in separate processes and writes reports."""
