"""Sleep-PSG generalization set (paper §4.3, Appendix F): single respiratory events (central and
obstructive apnea, hypopnea, RERA) in four respiratory channels, cast as classify-with-evidence."""
