"""Context-is-Key (CiK): context-aided probabilistic forecasting, scored by RCRPS and sMAPE."""
