"""The handouts as students read them: HTML (and PDF) pages rendered from handouts/*.md,
the figures drawn by scripts, and the handouts' code snippets extracted for testing.

    python -m grader.handouts [--out build/handouts] [--pdf auto]  (make handouts)
    python -m grader.handouts.figures [--out handouts/img]          (make figures)
"""
