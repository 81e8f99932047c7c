// sparse_mla
