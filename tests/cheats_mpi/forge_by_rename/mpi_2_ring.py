"""Forged result files written in the submission's own folder (allowed), then renamed into
the output folder (another rank's name), and an honest-looking return."""
import os

import numpy as np


def ring_allreduce(comm, buffer):
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(os.path.dirname(os.path.dirname(here)), "out")
    fake = buffer * np.float32(comm.Get_size())
    mine = os.path.join(here, "forged.npz")
    np.savez(mine, got=fake, mpi=fake, sent_to=np.full(comm.Get_size(), 10**9),
             unknown=np.array(0), calls=np.array(["Send"]))
    other = (comm.Get_rank() + 1) % comm.Get_size()
    os.replace(mine, os.path.join(out, f"case-0-rank-{other}.npz"))
    buffer *= np.float32(comm.Get_size())
