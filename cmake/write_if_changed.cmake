# rlgemm_write_if_changed(PATH TEXT): writes TEXT to PATH only when PATH does not already hold it, so that
# generated sources keep their time stamps and nothing that depends on them rebuilds for no reason.
function(rlgemm_write_if_changed path text)
  if(EXISTS ${path})
    file(READ ${path} old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE ${path} "${text}")
endfunction()
