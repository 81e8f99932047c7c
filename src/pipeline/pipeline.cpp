// pipeline
