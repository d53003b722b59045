"""Probes on cloud machines: the same probe as a local one, run as a short managed job.

- ``probe``: build the probe job, run it on the machine's service, keep its outcome;
- ``cache``: remote probe outcomes in the study storage (one job per key);
- ``settings``: where remote probes run (the image, each cloud's settings: ``cloud.yaml``);
- ``measured``: remote measurements as the local back end looks them up;
- ``cloud_probes``, ``rules``: ``advisor suggest --cloud-probes N``: which machines to
  probe, within which budget, and when to stop.
"""
