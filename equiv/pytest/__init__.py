"""equiv's pytest plugins (entry points ``pytest11``): inert unless equiv is asked for."""
