"""The ceilings study: predict, then compare with the recorded H200 data (or --live on a GPU).

    python experiments/study_ceilings.py [--live [--ncu]]
"""

from perfmodel.report.run import main

if __name__ == "__main__":
    main("ceilings")
