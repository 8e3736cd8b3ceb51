"""sparkdoctor: keep an LLM-serving box on DGX Spark (GB10, sm_121a) honest after every upgrade."""

__version__ = "0.1.0"
