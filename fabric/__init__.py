"""fedemu fabric: virtual time, message order, network faults, journal and replay."""
