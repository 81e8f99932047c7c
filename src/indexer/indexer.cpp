// indexer
