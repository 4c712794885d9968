-- KEYS[1]: the value, KEYS[2]: its fence. ARGV[1]: the writer's fence in
-- decimal, ARGV[2]: the value. Writes both unless the stored fence is
-- larger, which it then returns; else returns "". Fences compare as decimal
-- strings (the longer is larger): exact for every uint64, Lua numbers are not.
local f, s = ARGV[1], redis.call('GET', KEYS[2])
if s and (#s > #f or (#s == #f and s > f)) then
  return s
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], f)
return ''
