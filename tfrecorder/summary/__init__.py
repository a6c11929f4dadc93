"""Summary: what a person looks at after a conversion - the statistics (statistics.pb) and report.html."""
