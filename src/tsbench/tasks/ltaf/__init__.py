"""LTAF ECG generalization set (paper §4.3, Appendix F): single premature beats (PVC, APC) in
normal sinus rhythm, cast as classify-with-evidence. Read from PhysioNet's LTAFDB with wfdb."""
