# cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=... -DCXX_COMPILER=... -P this:
# configures and builds the consumer against the fp8dsa installed in PREFIX, then runs it.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -Dfp8dsa_ROOT=${PREFIX}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${BINARY_DIR}/fp8dsa_consumer COMMAND_ERROR_IS_FATAL ANY)
