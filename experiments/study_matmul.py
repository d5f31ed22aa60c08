"""The matmul study: predict, then compare with the recorded H200 data (or --live on a GPU).

    python experiments/study_matmul.py [--live [--ncu]]
"""

from perfmodel.report.run import main

if __name__ == "__main__":
    main("matmul")
