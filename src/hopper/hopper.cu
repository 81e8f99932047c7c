// Hopper primitive layer (headers in this folder); out-of-line pieces live here.
