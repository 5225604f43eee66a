"""The image-reader room: an unbooted root filesystem read in Python, confined to its root (`fs`), and
the probe's sections produced from it (`sections`, `units`, `packages`). The image and ami transports
use it; collect/ never imports it (it parses what this room prints as it parses the probe's output)."""
